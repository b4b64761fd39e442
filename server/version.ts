import pkg from '../package.json';

export const EMULATOR_VERSION: string = pkg.version;
