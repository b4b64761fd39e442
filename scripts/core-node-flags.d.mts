/** The node flags a headless core runs with (scripts/core-node-flags.mjs). */
export declare const CORE_NODE_FLAGS: string[];
