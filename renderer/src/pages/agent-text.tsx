// The text a stream's chunks spell, assembled as they arrive: what the stream inspector shows beside the raw
// frames. A chunk counts when its `data` is a string, or an object with a string `token`, `text`, `delta` or
// `content` (the first of these it has), or an OpenAI chat chunk re-yielded as is (`choices[0].delta.content`).
// Anything else (progress objects, tool results) is left out and counted, so the text never invents content.
import { compact } from './invocation-common';
import './agent.css';

/** The field names read, in order (docs/snippet-authors-guide.md says the same). */
export const TEXT_FIELDS = ['token', 'text', 'delta', 'content'] as const;

/** The text one chunk's `data` carries, or null when it carries none. */
export function chunkText(data: unknown): string | null {
  if (typeof data === 'string') return data;
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return null;
  const rec = data as Record<string, unknown>;
  for (const f of TEXT_FIELDS) if (typeof rec[f] === 'string') return rec[f];
  const choice: unknown = Array.isArray(rec.choices) ? rec.choices[0] : undefined;
  if (typeof choice === 'object' && choice !== null) {
    const delta = (choice as { delta?: unknown }).delta;
    if (typeof delta === 'object' && delta !== null && typeof (delta as { content?: unknown }).content === 'string')
      return (delta as { content: string }).content;
  }
  return null;
}

export interface Assembled {
  text: string;
  /** Chunks that gave text. */
  used: number;
  /** Chunks that did not (their data is not text). */
  skipped: number;
  /** One example of a skipped chunk, for the note. */
  example: unknown;
}

export function assembleChunks(datas: readonly unknown[]): Assembled {
  let text = '';
  let used = 0;
  let skipped = 0;
  let example: unknown;
  for (const d of datas) {
    const t = chunkText(d);
    if (t === null) {
      if (skipped++ === 0) example = d;
    } else {
      text += t;
      used++;
    }
  }
  return { text, used, skipped, example };
}

/** The assembled text, as a card beside the raw frames (stream.tsx). Nothing when no chunk carries text. */
export function AssembledText({ datas, going }: { datas: readonly unknown[]; going: boolean }) {
  const a = assembleChunks(datas);
  if (a.used === 0) return null;
  return (
    <section className="card inv-card agent-assembled" aria-labelledby="assembled-h" data-testid="assembled-text-card">
      <h2 id="assembled-h">
        Assembled text <span className="muted">({a.used === 1 ? '1 chunk' : `${a.used} chunks`})</span>
      </h2>
      <p className="stream-text agent-assembled-text" data-testid="stream-text" aria-live={going ? 'polite' : 'off'}>
        {a.text}
        {going && <span className="agent-caret" aria-hidden="true" />}
      </p>
      {a.skipped > 0 && (
        <p className="muted agent-small">
          {a.skipped} {a.skipped === 1 ? 'chunk carries' : 'chunks carry'} no text and {a.skipped === 1 ? 'is' : 'are'} left out, e.g.{' '}
          <code>{compact(a.example, 80)}</code>. Text is read from a string chunk or its <code>token</code>, <code>text</code>,{' '}
          <code>delta</code> or <code>content</code> field.
        </p>
      )}
    </section>
  );
}
