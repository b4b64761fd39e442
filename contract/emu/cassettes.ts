import { z } from 'zod';
import { defineOperation } from '../operation';
import { noContent, ok, problems } from '../responses';
import { Cassette, CassetteName, CassetteSummary, EgressModeSetting } from '../schemas/cassette';

/**
 * Record and replay of outbound calls (emulator only; contract/schemas/cassette.ts says how a run's mode
 * is chosen and where cassettes live).
 */

const SnippetRef = z.object({ id: z.string().meta({ description: 'Snippet id or name.' }) });
const CassetteRef = SnippetRef.extend({ name: CassetteName });
const TenantQuery = z.object({
  tenant: z.string().max(63).optional().meta({ description: 'The tenant whose snippet it is (default `local`).' }),
});

export const emuGetEgressMode = defineOperation({
  operationId: 'emuGetEgressMode',
  method: 'get',
  path: '/_emu/egress/mode',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'The server’s egress mode (live, record or replay) and replay speed',
  description:
    'What a run gets when neither the run (`X-Emu-Egress-Mode`) nor its snippet (`egress.mode` in `snippet.json`) says. Set at start by `serve --egress-mode` and `--replay-speed`.',
  responses: { 200: ok('The setting.', EgressModeSetting), ...problems(401) },
});

export const emuSetEgressMode = defineOperation({
  operationId: 'emuSetEgressMode',
  method: 'put',
  path: '/_emu/egress/mode',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Switch the server’s egress mode (the GUI’s switch); runs already started keep theirs',
  body: EgressModeSetting.partial(),
  responses: { 200: ok('The setting now.', EgressModeSetting), ...problems(400, 401, 415, 422) },
});

export const emuListCassettes = defineOperation({
  operationId: 'emuListCassettes',
  method: 'get',
  path: '/_emu/snippets/{id}/cassettes',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'A snippet’s cassettes: recorded outbound calls, by name',
  params: SnippetRef,
  query: TenantQuery,
  responses: { 200: ok('Every cassette of the snippet.', z.object({ data: z.array(CassetteSummary) })), ...problems(400, 401, 404) },
});

export const emuGetCassette = defineOperation({
  operationId: 'emuGetCassette',
  method: 'get',
  path: '/_emu/snippets/{id}/cassettes/{name}',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'One cassette: the HAR 1.2 document (open it in any HAR viewer)',
  params: CassetteRef,
  query: TenantQuery,
  responses: { 200: ok('The cassette.', Cassette), ...problems(400, 401, 404) },
});

export const emuDeleteCassette = defineOperation({
  operationId: 'emuDeleteCassette',
  method: 'delete',
  path: '/_emu/snippets/{id}/cassettes/{name}',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Delete a cassette (the next record run starts a new one)',
  params: CassetteRef,
  query: TenantQuery,
  responses: { 204: noContent, ...problems(400, 401, 404) },
});

export const emuPutCassette = defineOperation({
  operationId: 'emuPutCassette',
  method: 'put',
  path: '/_emu/snippets/{id}/cassettes/{name}',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Write a whole cassette (what `import-report` and state import use); replaces one of the same name',
  description:
    'The body is a cassette as `GET` answers it. It is checked like a file read from disk (HAR 1.2 with the `_svcEmu` extension, docs/cassettes.md); credentials are redacted again with this tenant’s secrets before it is written.',
  params: CassetteRef,
  query: TenantQuery,
  body: Cassette,
  responses: { 200: ok('What was written.', CassetteSummary), ...problems(400, 401, 404, 415, 422) },
});
