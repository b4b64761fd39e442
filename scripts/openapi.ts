// Regenerates docs/openapi.json from the route definitions (npm run openapi). A test fails when the
// checked-in file and the code disagree.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildOpenApi } from '../server/api/openapi';
import { EMULATOR_VERSION } from '../server/version';

const path = join(__dirname, '..', 'docs', 'openapi.json');
writeFileSync(path, JSON.stringify(buildOpenApi(undefined, EMULATOR_VERSION), null, 2) + '\n');
console.log(`wrote ${path}`);
