// Running the tools set-up drives (npm, uv, apt-get, the build), and the one error it reports as such.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { ROOT } from './paths.mjs';

/** A failure set-up explains in one message (no stack): a tool failed, an input is wrong. */
export class SetupError extends Error {}

/**
 * Runs a command (argv array, no shell), stdin closed, output captured; rejects with the output's tail.
 * @param {Ctx} ctx
 * @param {string} label
 * @param {string[]} argv
 * @param {{ env?: Record<string, string | undefined>, timeoutMs?: number, cwd?: string }} [opts] env: a value of undefined removes the variable
 */
export function runTool(ctx, label, argv, opts = {}) {
  return new Promise((resolvePromise, reject) => {
    const [cmd, ...args] = argv;
    // Output is captured and shown only on failure: keep it free of colour codes unless it goes to a terminal.
    const colour = process.stderr.isTTY ? {} : { NO_COLOR: '1', FORCE_COLOR: '0' };
    const env = { ...process.env, ...colour, ...opts.env };
    for (const [key, value] of Object.entries(env)) if (value === undefined) delete env[key];
    const child = spawn(cmd, args, {
      cwd: opts.cwd ?? ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      shell: process.platform === 'win32' && !cmd.endsWith('.exe') && cmd !== process.execPath,
      windowsHide: true,
    });
    let output = '';
    const keep = (chunk) => {
      output += chunk;
      if (output.length > 200_000) output = output.slice(-100_000);
    };
    child.stdout.setEncoding('utf8').on('data', keep);
    child.stderr.setEncoding('utf8').on('data', keep);
    const timer = opts.timeoutMs ? setTimeout(() => child.kill('SIGTERM'), opts.timeoutMs) : undefined;
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new SetupError(`${label} could not start: ${error.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolvePromise(output);
      const tail = output.trim().split('\n').slice(-40).join('\n');
      const how = signal ? `was killed (${signal})` : `exited with ${code}`;
      reject(new SetupError(`${label} ${how}${tail ? `:\n${tail}` : ''}`));
    });
  });
}

/** npm as an argv: the npm that runs us (npm_execpath) when there is one, else `npm` on PATH. */
export function npmCommand(args) {
  const execPath = process.env.npm_execpath;
  if (execPath && /npm-cli\.[cm]?js$/.test(execPath) && existsSync(execPath)) return [process.execPath, execPath, ...args];
  return [process.platform === 'win32' ? 'npm.cmd' : 'npm', ...args];
}

/** First line of `bin ...args` (a version), or a SetupError. */
export function toolVersion(bin, args) {
  const result = spawnSync(bin, args, { encoding: 'utf8', timeout: 30_000, stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.status !== 0) {
    const why = result.error
      ? result.error.message
      : `exit ${result.status}${result.signal ? ` (${result.signal})` : ''}: ${(result.stderr ?? '').trim().split('\n').slice(-3).join(' ')}`;
    throw new SetupError(`${bin} ${args.join(' ')} failed: ${why}`);
  }
  return result.stdout.trim().split('\n')[0].trim();
}
