// Regenerates docs/openapi.json from the contract's operations (contract/openapi.ts) (npm run openapi). A test fails
// when the checked-in file and the code disagree. The GUI takes its types from the contract itself (renderer/src/types.ts).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildOpenApi } from '../contract/openapi';
import { EMULATOR_VERSION } from '../server/version';

const document = buildOpenApi(undefined, EMULATOR_VERSION);
const path = join(__dirname, '..', 'docs', 'openapi.json');
writeFileSync(path, JSON.stringify(document, null, 2) + '\n');
console.log(`wrote ${path}`);
