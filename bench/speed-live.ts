import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { leanClient } from './lean-http';
import { client, serveCore, stats } from './lib';
import { AGENTS, EXAMPLES, PROMPT } from './speed-cold';
import { adminToken, invokeTarget, okCall, setUpAgentTenant, waitSparesReady, type SpeedCtx } from './speed-core';
import { ms } from './table';
import { startFakeProvider } from '../fixtures/fake-openai/server';

/**
 * Save-to-live: a file written in the workspace → the first invocation returning the new output (the
 * watcher, code check, version, deploy and cold start included), against a core started with
 * `--workspace` (its own process and data dir). For a hello in Bun and Python and copies of the Mastra and
 * LangGraph agent examples, whose return value gets an `edit` field from a constant the bench rewrites (the
 * fake provider's answer would not show an edit). Paced: each save waits until the spares are ready.
 * After the write the bench polls the `dev` environment (GET …/environments, every 3 ms) until it runs a
 * new version, then invokes until the answer carries the edit.
 */
interface LiveSnippet {
  key: string;
  label: string;
  name: string;
  file: string;
  code(edit: number): string;
  body: unknown;
  config?: string;
}

const HELLOS: LiveSnippet[] = [
  {
    key: 'hello.bun',
    label: 'hello Bun',
    name: 'live-bun',
    file: 'index.ts',
    code: (i) => `export default async function handler() { return { edit: ${i} }; }\n`,
    body: {},
  },
  {
    key: 'hello.python',
    label: 'hello Python',
    name: 'live-python',
    file: 'main.py',
    code: (i) => `def handler(input):\n    return {"edit": ${i}}\n`,
    body: {},
  },
];

/** The example's file with `edit` in its return value, from a constant at its end that each save changes. */
function agentCode(a: (typeof AGENTS)[number]): (edit: number) => string {
  const src = readFileSync(join(EXAMPLES, a.name, a.entry), 'utf8');
  const [from, to, constant] =
    a.runtime === 'bun'
      ? ['  return {\n    answer: await result.text,', '  return {\n    edit: EDIT,\n    answer: await result.text,', 'const EDIT = ']
      : [
          '    return {"answer": answer, "tool_calls": calls}',
          '    return {"edit": EDIT, "answer": answer, "tool_calls": calls}',
          'EDIT = ',
        ];
  if (!src.includes(from))
    throw new Error(`${a.name}/${a.entry} no longer returns as the bench expects (${JSON.stringify(from)}): update bench/speed-live.ts`);
  const edited = src.replace(from, to);
  return (i) => `${edited}\n${constant}${i}${a.runtime === 'bun' ? ';' : ''}\n`;
}

export async function livePart(ctx: SpeedCtx): Promise<void> {
  const snippets: LiveSnippet[] = [
    ...HELLOS,
    ...AGENTS.map((a) => ({
      key: `agent.${a.key}`,
      label: a.label,
      name: `live-${a.name}`,
      file: a.entry,
      code: agentCode(a),
      body: PROMPT,
      config: join(EXAMPLES, a.name, 'snippet.json'),
    })),
  ];
  const ws = mkdtempSync(join(tmpdir(), 'svc-emu-bench-ws-'));
  const data = mkdtempSync(join(tmpdir(), 'svc-emu-bench-live-'));
  for (const s of snippets) {
    mkdirSync(join(ws, 'snippets', s.name), { recursive: true });
    if (s.config) copyFileSync(s.config, join(ws, 'snippets', s.name, 'snippet.json'));
    writeFileSync(join(ws, 'snippets', s.name, s.file), s.code(0));
  }
  const fake = await startFakeProvider();
  const core = await serveCore(data, { args: ['--workspace', ws] });
  const call = client(core.url, core.apiKey);
  const asAdmin = client(core.url, adminToken(data));
  const detail: Record<string, unknown> = {};
  try {
    await setUpAgentTenant(okCall(call), fake);
    const edits = ctx.quick ? 3 : 10;
    for (const s of snippets) {
      const invoke = leanClient(invokeTarget(core, s.name, () => true, { query: '?env=dev', body: s.body }));
      const devVersion = async () => {
        const r = await call('GET', `/v1/snippets/${s.name}/environments`);
        if (r.status !== 200) return null;
        return (
          (JSON.parse(r.body) as { data: { env: string; version: number | null }[] }).data.find((d) => d.env === 'dev')?.version ?? null
        );
      };
      /** Invokes until the answer carries edit `i`; throws after `deadline`. */
      const untilEdit = async (i: number, deadline: number) => {
        for (;;) {
          const r = await invoke.send();
          if (r.status === 200 && (JSON.parse(r.body) as { edit?: unknown }).edit === i) return;
          if (performance.now() > deadline)
            throw new Error(`save-to-live: edit ${i} of ${s.name} not live (last answer ${r.status} ${r.body.slice(0, 300)})`);
          await new Promise((res) => setTimeout(res, 3));
        }
      };
      const samples: number[] = [];
      let sparesNotReady = 0;
      try {
        await untilEdit(0, performance.now() + 60_000); // the first load (the workspace's initial sync, a cold import)
        for (let i = 1; i <= edits; i++) {
          if ((await waitSparesReady(asAdmin)) === null) sparesNotReady++;
          const before = await devVersion();
          const t0 = performance.now();
          writeFileSync(join(ws, 'snippets', s.name, s.file), s.code(i));
          const deadline = t0 + 20_000;
          while ((await devVersion()) === before) {
            if (performance.now() > deadline) throw new Error(`save-to-live: ${s.name} edit ${i} was never deployed to dev`);
            await new Promise((res) => setTimeout(res, 3));
          }
          await untilEdit(i, deadline);
          samples.push(performance.now() - t0);
        }
      } finally {
        invoke.close();
      }
      const st = stats(samples);
      detail[s.name] = { ...st, spares_not_ready: sparesNotReady };
      ctx.add({
        key: `live.${s.key}`,
        figure: `save-to-live, ${s.label}`,
        emulator: ms(st),
        measured: { p50: st.p50_ms, p99: st.p99_ms },
        ...(sparesNotReady ? { note: `${sparesNotReady} of ${edits} saves found no spare ready within 15 s` } : {}),
      });
    }
    detail.note = 'file written → first invocation answering the new output; the dev environment is polled every 3 ms, then invoked';
    ctx.detail.save_to_live = detail;
  } finally {
    await core.stop();
    await fake.close();
    rmSync(ws, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  }
}
