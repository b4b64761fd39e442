// Where set-up reads and writes: the checkout's root, the stamps that make a re-run quick, and the runtimes'
// sources (executor/runtimes) and install dir (.runtimes/, or SVC_EMU_RUNTIMES_DIR).
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export const INSTALL_STAMP = join(ROOT, 'node_modules', '.svc-emu-setup.json');
export const BUILD_STAMP = join(ROOT, 'out', '.build-stamp');
export const HOST_STAMP = join(ROOT, 'out', '.host-setup.json');
export const LOCK_DIR = join(ROOT, 'out', '.setup.lock');

export const SKIP_DIRS = new Set(['node_modules', '__pycache__', '.venv', '.git', 'out', 'dist']);

// Runtimes (docs/architecture.md, "Runtimes"). Sources live in executor/runtimes; what setup installs lives in .runtimes/
// (gitignored, machine-local). executor/runtimes/manifest.json is the single source of truth; the Bun
// package.json + lock and the Python requirements derive from it (`--relock-runtimes` regenerates them).
// SVC_EMU_RUNTIMES_DIR: elsewhere (a Lima VM installs its own Linux runtimes beside the host's mounted checkout).
export const RUNTIMES_DIR = process.env.SVC_EMU_RUNTIMES_DIR ? resolve(process.env.SVC_EMU_RUNTIMES_DIR) : join(ROOT, '.runtimes');
export const MANIFEST = join(ROOT, 'executor', 'runtimes', 'manifest.json');
export const RUNTIME_PACKAGE = join(ROOT, 'executor', 'runtimes', 'bun', 'runtime-package.json');
export const RUNTIME_PACKAGE_LOCK = join(ROOT, 'executor', 'runtimes', 'bun', 'runtime-package-lock.json');
/** Our Bun libraries: installed as real copies (not symlinks) so they resolve from inside .runtimes/bun. */
export const SVC_BUN_PACKAGES = {
  '@svc/store': 'executor/runtimes/bun/packages/svc-store',
  '@svc/integrations': 'executor/runtimes/bun/packages/svc-integrations',
};
export const REQUIREMENTS = join(ROOT, 'executor', 'runtimes', 'python', 'requirements.txt');
export const SVC_PYTHON = join(ROOT, 'executor', 'runtimes', 'python', 'svc');
export const BUN_DIR = join(RUNTIMES_DIR, 'bun');
export const BUN_STAMP = join(BUN_DIR, '.svc-emu-stamp.json');
export const UV_DIR = join(RUNTIMES_DIR, 'uv');
export const UV_STAMP = join(UV_DIR, '.svc-emu-stamp.json');
export const VENV = join(RUNTIMES_DIR, 'python');
export const PYTHON_STAMP = join(VENV, '.svc-emu-stamp.json');
export const RUNTIME_LOCK = join(RUNTIMES_DIR, 'runtime-lock.json');
export const RELOCK_COMMAND = 'node scripts/setup.mjs --relock-runtimes';
