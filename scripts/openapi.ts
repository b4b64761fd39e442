// Regenerates docs/openapi.json from the route definitions, and from it the GUI's types in
// renderer/src/api-types.ts (npm run openapi). A test fails when either checked-in file and the code disagree.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildOpenApi } from '../server/api/openapi';
import { clientTypes } from '../server/api/client-types';
import { EMULATOR_VERSION } from '../server/version';

const document = buildOpenApi(undefined, EMULATOR_VERSION);
const path = join(__dirname, '..', 'docs', 'openapi.json');
writeFileSync(path, JSON.stringify(document, null, 2) + '\n');
console.log(`wrote ${path}`);
const types = join(__dirname, '..', 'renderer', 'src', 'api-types.ts');
writeFileSync(types, clientTypes(document as Parameters<typeof clientTypes>[0]));
console.log(`wrote ${types}`);
