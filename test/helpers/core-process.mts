/**
 * A core in its own process, for tests that must kill it (crash test) or need a second process on a
 * data dir. Usage: node --import tsx test/helpers/core-process.mts DATA_DIR [--project-root DIR]
 * `--project-root` gives the core the project's runtimes (real Bun/Python runners); without it the core
 * runs no snippets (its executor says the runtimes cannot be found).
 * `--config JSON` adds startEmulator options (e.g. '{"asyncWorkers":2}').
 * Prints one JSON line `{url, key, admin, pid, data_dir}` on stdout once the core listens; logs go to stderr.
 */
import { startEmulator } from '../../server/index';

const dataDir = process.argv[2];
if (!dataDir || dataDir.startsWith('--')) {
  process.stderr.write('usage: core-process.mts DATA_DIR [--project-root DIR]\n');
  process.exit(2);
}
const rootAt = process.argv.indexOf('--project-root');
const projectRoot = rootAt > 0 ? process.argv[rootAt + 1] : undefined;
if (rootAt > 0 && !projectRoot) {
  process.stderr.write('--project-root needs a directory\n');
  process.exit(2);
}
const configAt = process.argv.indexOf('--config');
const extra = configAt > 0 ? (JSON.parse(process.argv[configAt + 1] ?? '{}') as Record<string, unknown>) : {};
// No framework spares unless the test's --config asks ({"spares":"all"}): a LangGraph import is ~1 s of CPU per core start.
const emu = await startEmulator({ dataDir, port: 0, spares: 'plain', ...(projectRoot ? { projectRoot } : {}), ...extra });
process.stdout.write(
  JSON.stringify({ url: emu.url, key: emu.localApiKey, admin: emu.adminToken, pid: process.pid, data_dir: emu.dataDir }) + '\n',
);
const stop = () => {
  emu.stop().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
