// Cassettes: a snippet's recorded outbound calls (`#/snippet/{name}/cassettes[/{cassette}]`). The list
// (name, entries, episodes, size, updated) and one cassette opened: each call with its method, URL,
// status, source, chunk count, total time and a strip of when each chunk arrived; its bodies with the
// redaction markers picked out; delete (asked first) and download as `.har` (HAR 1.2 with the `_svcEmu`
// extension, contract/schemas/cassette.ts: any HAR viewer opens it). Both follow the live feed's
// `cassette.changed` (a record run that writes one shows at once, never polled).
import { useState, type ReactNode } from 'react';
import type { z } from 'zod';
import type { Cassette as CassetteSchema, CassetteSummary as CassetteSummarySchema, HarEntry as HarEntrySchema } from '../../../contract';
import { operations, ProblemError } from '../api';
import { useApp } from '../context';
import { saveBlob } from '../download';
import { useLiveLoad } from '../live-react';
import { href, navigate } from '../router';
import { ConfirmButton } from '../ui/controls';
import { EmptyState, ProblemNotice, Show, when } from '../ui/kit';
import type { SnippetTabProps } from './snippet';
import './operator.css';
import './cassettes.css';

type CassetteSummary = z.output<typeof CassetteSummarySchema>;
type Cassette = z.output<typeof CassetteSchema>;
type HarEntry = z.output<typeof HarEntrySchema>;

const size = (n: number) =>
  n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`;

/** Downloads a cassette as `<snippet>-<name>.har`. */
async function downloadHar(api: ReturnType<typeof useApp>['api'], snippet: string, name: string, loaded?: Cassette): Promise<void> {
  const doc = loaded ?? (await api.client.call(operations.emuGetCassette, { params: { id: snippet, name } }));
  saveBlob(new Blob([JSON.stringify(doc, null, 2)], { type: 'application/json' }), `${snippet}-${name}.har`);
}

export function CassettesTab({ snippet, rest }: SnippetTabProps) {
  const open = rest[0];
  return open ? <CassetteView snippet={snippet.name} name={open} /> : <CassetteList snippet={snippet.name} />;
}

function CassetteList({ snippet }: { snippet: string }) {
  const { api } = useApp();
  const [loaded, reload] = useLiveLoad(
    async () => (await api.client.call(operations.emuListCassettes, { params: { id: snippet } })).data,
    [api, snippet],
    ['cassette.changed'],
    (e) => 'snippet' in e.data && e.data.snippet === snippet,
  );
  const [error, setError] = useState<unknown>(null);

  async function act(fn: () => Promise<unknown>) {
    setError(null);
    try {
      await fn();
    } catch (e) {
      setError(e);
    }
    reload();
  }

  return (
    <div className="cas" data-testid="cassettes">
      <p className="op-intro cas-intro">
        Outbound calls recorded by runs in <strong>record</strong> mode, played back in <strong>replay</strong> mode (switch on the{' '}
        <a href={href('egress')}>Egress</a> page, per run on the Run tab, or with <code>egress</code> in <code>snippet.json</code>).
        Credentials never reach a cassette: what was redacted is marked.
      </p>
      {error !== null && <ProblemNotice error={error} />}
      <Show loaded={loaded}>
        {(list) =>
          list.length === 0 ? (
            <EmptyState title="No cassettes yet">
              Run {snippet} in record mode (the Run tab’s “Egress” choice): its calls are written to the cassette <code>default</code>.
            </EmptyState>
          ) : (
            <div className="op-scroll">
              <table className="op-table" data-testid="cassette-list">
                <thead>
                  <tr>
                    <th>Name</th>
                    <th className="op-num">Entries</th>
                    <th className="op-num">Episodes</th>
                    <th className="op-num">Size</th>
                    <th>Updated</th>
                    <th>
                      <span className="op-sr">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {list.map((c: CassetteSummary) => (
                    <tr key={c.name} data-testid="cassette-row" data-name={c.name}>
                      <td>
                        <a href={href('snippet', snippet, 'cassettes', c.name)} data-testid="cassette-open">
                          <code>{c.name}</code>
                        </a>
                        <div className="op-hint cas-path" title={c.path}>
                          {c.path}
                        </div>
                      </td>
                      <td className="op-num" data-testid="cassette-entries">
                        {c.entries}
                      </td>
                      <td className="op-num" title={c.episodes.join('\n')}>
                        {c.episodes.length}
                      </td>
                      <td className="op-num">{size(c.bytes)}</td>
                      <td className="op-nowrap">{when(c.updated_at)}</td>
                      <td className="op-row-actions">
                        <button
                          type="button"
                          className="op-btn op-small"
                          onClick={() => void act(() => downloadHar(api, snippet, c.name))}
                          data-testid="cassette-download"
                        >
                          Download .har
                        </button>{' '}
                        <ConfirmButton
                          label="Delete"
                          question={`Delete cassette ${c.name}?`}
                          onConfirm={() =>
                            act(() => api.client.call(operations.emuDeleteCassette, { params: { id: snippet, name: c.name } }))
                          }
                          testid="cassette-delete"
                        />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Show>
    </div>
  );
}

function CassetteView({ snippet, name }: { snippet: string; name: string }) {
  const { api } = useApp();
  const [loaded] = useLiveLoad(
    async () => await api.client.call(operations.emuGetCassette, { params: { id: snippet, name } }),
    [api, snippet, name],
    ['cassette.changed'],
    (e) => 'snippet' in e.data && e.data.snippet === snippet && 'name' in e.data && e.data.name === name,
  );
  const [error, setError] = useState<unknown>(null);

  const back = (
    <nav className="cas-crumbs" aria-label="Cassette">
      <a href={href('snippet', snippet, 'cassettes')}>All cassettes</a> <span aria-hidden="true">/</span> <code>{name}</code>
    </nav>
  );
  if (loaded.state === 'error' && loaded.error instanceof ProblemError && loaded.error.status === 404) {
    return (
      <div className="cas">
        {back}
        <EmptyState title={`No cassette named “${name}”`}>It was deleted, or never recorded.</EmptyState>
      </div>
    );
  }
  return (
    <div className="cas" data-testid="cassette">
      {back}
      {error !== null && <ProblemNotice error={error} />}
      <Show loaded={loaded}>
        {(doc) => {
          const entries = doc.log.entries;
          const episodes = [...new Set(entries.map((e) => e._svcEmu.invocation_id))];
          return (
            <>
              <div className="cas-head">
                <div>
                  <h2>
                    Cassette <code>{name}</code>
                  </h2>
                  <p className="muted cas-facts">
                    {entries.length} {entries.length === 1 ? 'call' : 'calls'} from {episodes.length}{' '}
                    {episodes.length === 1 ? 'run' : 'runs'} · HAR {doc.log.version}, format {doc.log._svcEmu.format} · recorded by{' '}
                    {doc.log.creator.name} {doc.log.creator.version}
                    {doc.log._svcEmu.match && <> · matchers {JSON.stringify(doc.log._svcEmu.match)}</>}
                  </p>
                </div>
                <div className="op-actions">
                  <button
                    type="button"
                    className="op-btn"
                    onClick={() =>
                      saveBlob(new Blob([JSON.stringify(doc, null, 2)], { type: 'application/json' }), `${snippet}-${name}.har`)
                    }
                    data-testid="cassette-download"
                  >
                    Download .har
                  </button>
                  <ConfirmButton
                    label="Delete"
                    question={`Delete cassette ${name}?`}
                    small={false}
                    onConfirm={async () => {
                      setError(null);
                      try {
                        await api.client.call(operations.emuDeleteCassette, { params: { id: snippet, name } });
                        navigate('snippet', snippet, 'cassettes');
                      } catch (e) {
                        setError(e);
                      }
                    }}
                    testid="cassette-delete"
                  />
                </div>
              </div>
              {entries.length === 0 ? (
                <EmptyState title="No calls in this cassette" />
              ) : (
                <ol className="cas-entries" data-testid="cassette-entries-list">
                  {entries.map((e, i) => (
                    <EntryItem key={`${e._svcEmu.invocation_id}-${e._svcEmu.seq}-${i}`} entry={e} />
                  ))}
                </ol>
              )}
            </>
          );
        }}
      </Show>
    </div>
  );
}

const statusClass = (s: number) => (s === 0 ? 'op-bad' : s < 300 ? 'op-ok' : s < 400 ? 'op-info' : s < 500 ? 'op-warn' : 'op-bad');

function EntryItem({ entry: e }: { entry: HarEntry }) {
  const x = e._svcEmu;
  const chunks = x.chunks;
  const last = chunks.length ? chunks[chunks.length - 1]!.t_ms : 0;
  let url = e.request.url;
  try {
    const u = new URL(e.request.url);
    url = `${u.host}${u.pathname}${u.search}`;
  } catch {
    // not absolute: shown as recorded
  }
  return (
    <li className="cas-entry" data-testid="cassette-entry" data-seq={x.seq}>
      <details>
        <summary>
          <span className="cas-method">{e.request.method}</span>
          <code className="cas-url" title={e.request.url}>
            {url}
          </code>
          {x.error ? (
            <span className="op-pill op-bad" title={x.error}>
              no answer
            </span>
          ) : (
            <span className={`op-pill ${statusClass(e.response.status)}`} data-testid="cassette-entry-status">
              {e.response.status}
            </span>
          )}
          <span className="cas-source">
            {x.source}
            {x.integration && (
              <>
                {' '}
                <code>{x.integration}</code>
              </>
            )}
          </span>
          <span className="cas-num" title="Chunks of the response body as they arrived">
            {chunks.length} {chunks.length === 1 ? 'chunk' : 'chunks'}
          </span>
          <span className="cas-num">{Math.round(e.time).toLocaleString()} ms</span>
          <ChunkStrip chunks={chunks} total={Math.max(e.time, last)} />
          {x.redacted.length > 0 && (
            <span className="cas-redacted-chip" title={`Redacted: ${x.redacted.join(', ')}`}>
              {x.redacted.length} redacted
            </span>
          )}
        </summary>
        <div className="cas-body">
          <p className="op-hint">
            Run <a href={href('invocation', x.invocation_id)}>{x.invocation_id}</a> · call #{x.seq} · started {when(e.startedDateTime)}
            {x.error && <> · failed: {x.error}</>}
          </p>
          {x.redacted.length > 0 && (
            <p className="cas-redacted-list" data-testid="cassette-redacted">
              Redacted before writing:{' '}
              {x.redacted.map((r) => (
                <code key={r} className="cas-mark">
                  {r}
                </code>
              ))}
            </p>
          )}
          <div className="cas-two">
            <section>
              <h3>Request</h3>
              <Headers list={e.request.headers} />
              <Body text={e.request.postData?.text} mime={e.request.postData?.mimeType} testid="cassette-request-body" />
            </section>
            <section>
              <h3>
                Response <span className="muted">{e.response.statusText}</span>
              </h3>
              <Headers list={e.response.headers} />
              <Body
                text={e.response.content.text}
                mime={e.response.content.mimeType}
                encoding={e.response.content.encoding}
                testid="cassette-response-body"
              />
            </section>
          </div>
        </div>
      </details>
    </li>
  );
}

/** When each chunk arrived, as ticks along the call's total time. */
function ChunkStrip({ chunks, total }: { chunks: { t_ms: number; bytes: number }[]; total: number }) {
  const W = 120;
  const H = 14;
  const span = total > 0 ? total : 1;
  return (
    <svg
      className="cas-strip"
      width={W}
      height={H}
      viewBox={`0 0 ${W} ${H}`}
      role="img"
      aria-label={`${chunks.length} chunks over ${Math.round(total)} ms`}
      data-testid="cassette-strip"
    >
      <line x1={0} y1={H - 1} x2={W} y2={H - 1} className="cas-strip-axis" />
      {chunks.map((c, i) => {
        const x = Math.min(W - 1, Math.max(1, (c.t_ms / span) * W));
        return <line key={i} x1={x} y1={2} x2={x} y2={H - 2} className="cas-strip-tick" />;
      })}
    </svg>
  );
}

function Headers({ list }: { list: { name: string; value: string }[] }) {
  if (!list.length) return null;
  return (
    <details className="cas-headers">
      <summary>{list.length} headers</summary>
      <table className="cas-kv">
        <tbody>
          {list.map((h, i) => (
            <tr key={`${h.name}-${i}`}>
              <th>{h.name}</th>
              <td>
                <Marked text={h.value} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </details>
  );
}

const MARK = /(\[secret [A-Za-z0-9_]+\]|\[redacted[^\]]*\])/g;

/** Text with the redaction markers (`[secret NAME]`, `[redacted…]`) picked out. */
function Marked({ text }: { text: string }) {
  const parts: ReactNode[] = text.split(MARK).map((p, i) =>
    i % 2 === 1 ? (
      <mark key={i} className="cas-mark" data-testid="redaction-marker">
        {p}
      </mark>
    ) : (
      p
    ),
  );
  return <>{parts}</>;
}

function Body({ text, mime, encoding, testid }: { text: string | undefined; mime: string | undefined; encoding?: string; testid: string }) {
  if (text === undefined || text === '') return <p className="muted">No body.</p>;
  if (encoding === 'base64') {
    return (
      <p className="muted" data-testid={testid}>
        {mime ?? 'binary'} body, {size(Math.floor((text.length * 3) / 4))} (base64 in the file).
      </p>
    );
  }
  let shown = text;
  if (mime?.includes('json')) {
    try {
      shown = JSON.stringify(JSON.parse(text), null, 2);
    } catch {
      // not one JSON document (a stream of events): shown as recorded
    }
  }
  const cut = shown.length > 20_000;
  return (
    <>
      <pre className="cas-pre" data-testid={testid}>
        <Marked text={cut ? shown.slice(0, 20_000) : shown} />
      </pre>
      {cut && (
        <p className="muted">Showing the first 20,000 characters of {shown.length.toLocaleString()}: download the .har for all of it.</p>
      )}
      {mime && <p className="op-hint">{mime}</p>}
    </>
  );
}
