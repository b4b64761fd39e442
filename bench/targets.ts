/**
 * Issue 16's targets, in one place: each row of the speed table (bench/speed.ts) names its key here, and
 * `met` judges the row's measurement. A target that needs the anchor (Miniflare) is not judged (null) when
 * the anchor could not run. Rows without an entry are reported figures (before/after, no target).
 */
export interface Measured {
  p50?: number;
  p99?: number;
  /** A single figure (req/s, MB, a fraction, a count). */
  value?: number;
  /** The anchor's figure measured in the same run (Miniflare's p50 or req/s), null when it could not run. */
  anchor?: number | null;
}

export interface Target {
  text: string;
  met(m: Measured): boolean | null;
}

const num = (x: number | undefined): x is number => typeof x === 'number' && Number.isFinite(x);
/** `cond` once the anchor is there; null (not judged) without it. */
const withAnchor = (m: Measured, cond: (anchor: number) => boolean) => (num(m.anchor ?? undefined) ? cond(m.anchor!) : null);

const warm100: Target = {
  text: 'p50 ≤ 1.0 ms, p99 ≤ 3 ms, p50 ≤ Miniflare p50',
  met: (m) => {
    const own = num(m.p50) && num(m.p99) && m.p50 <= 1.0 && m.p99 <= 3;
    const vs = withAnchor(m, (a) => m.p50! <= a);
    return vs === null ? (own ? null : false) : own && vs;
  },
};
const warm10: Target = {
  text: 'p50 ≤ 1.5 × Miniflare p50 (the cap’s cost: docs/parity.md)',
  met: (m) => withAnchor(m, (a) => num(m.p50) && m.p50 <= 1.5 * a),
};
const atMost = (limit: number, unit: string, stat: 'p50' | 'p99' | 'value' = 'p50'): Target => ({
  text: `${stat === 'value' ? '' : `${stat} `}≤ ${limit} ${unit}`.trim(),
  met: (m) => num(m[stat]) && m[stat] <= limit,
});

export const TARGETS: Record<string, Target> = {
  'warm.bun.cpu100': warm100,
  'warm.python.cpu100': warm100,
  'warm.bun.cpu10': warm10,
  'warm.python.cpu10': warm10,
  throughput: {
    text: '≥ 2,000 req/s and ≥ Miniflare’s',
    met: (m) => {
      const own = num(m.value) && m.value >= 2000;
      const vs = withAnchor(m, (a) => m.value! >= a);
      return vs === null ? (own ? null : false) : own && vs;
    },
  },
  'cold.hello.bun': atMost(10, 'ms'),
  'cold.hello.python': atMost(10, 'ms'),
  'cold.agent.mastra': atMost(50, 'ms'),
  'cold.agent.langgraph': atMost(50, 'ms'),
  'live.hello.bun': atMost(40, 'ms'),
  'live.hello.python': atMost(40, 'ms'),
  'live.agent.mastra': atMost(60, 'ms'),
  'live.agent.langgraph': atMost(60, 'ms'),
  'limits.timeout_overshoot': atMost(50, 'ms', 'p99'),
  'limits.cpu_share': { text: 'each within ±15% (relative)', met: (m) => num(m.value) && m.value <= 0.15 },
  'limits.oom': { text: '100% named oom_killed', met: (m) => m.value === 1 },
  'durable.async_202': { text: '100% on disk when the 202 arrives', met: (m) => m.value === 1 },
  'durable.sync_record': atMost(100, 'ms', 'p99'),
  'rss.core_idle': atMost(80, 'MB', 'value'),
  'start.readyz': { text: 'every start < 400 ms (p99)', met: (m) => num(m.p99) && m.p99 < 400 },
};
