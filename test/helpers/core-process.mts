/**
 * A core in its own process, for tests that must kill it (crash test) or need a second process on a
 * data dir. Usage: node --import tsx test/helpers/core-process.mts DATA_DIR
 * Prints one JSON line `{url, key, admin, pid}` on stdout once the core listens; logs go to stderr.
 */
import { startEmulator } from '../../server/index';

const dataDir = process.argv[2];
if (!dataDir) {
  process.stderr.write('usage: core-process.mts DATA_DIR\n');
  process.exit(2);
}
const emu = await startEmulator({ dataDir, port: 0 });
process.stdout.write(JSON.stringify({ url: emu.url, key: emu.localApiKey, admin: emu.adminToken, pid: process.pid }) + '\n');
const stop = () => {
  emu.stop().then(() => process.exit(0), () => process.exit(1));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
