/**
 * Import profiles (executor/import-profile.ts): which spare a bundle's cold start claims. Read from the examples
 * and from tricky inputs. A wrong guess costs only time (the snippet runs the same on any spare), so an import
 * named in a comment or a string may count either way; these tests pin what the scan does today.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FRAMEWORKS, importedModules, importProfile, topLevelModules } from '../../executor/import-profile';
import { PROJECT_ROOT } from '../helpers/core';

const example = (name: string, file: string) => ({
  [file]: readFileSync(join(PROJECT_ROOT, 'fixtures', 'workspace', 'snippets', name, file), 'utf8'),
});

describe('import profiles', () => {
  it('the examples: the agents and streams import their framework, hello and the store counter do not', () => {
    expect(importProfile('bun', example('mastra-agent', 'index.ts'))).toBe('mastra');
    expect(importProfile('bun', example('ai-token-stream', 'index.ts'))).toBe('mastra'); // `ai` alone: the AI SDK is in the profile
    expect(importProfile('python', example('langgraph-agent', 'main.py'))).toBe('langgraph');
    expect(importProfile('python', example('langgraph-stream', 'main.py'))).toBe('langgraph');
    expect(importProfile('bun', example('hello-bun', 'index.ts'))).toBe('plain');
    expect(importProfile('python', example('hello-python', 'main.py'))).toBe('plain');
    expect(importProfile('bun', example('counter', 'index.ts'))).toBe('plain');
  });

  it('each import form of TypeScript / JavaScript', () => {
    const p = (code: string) => importProfile('bun', { 'index.ts': code });
    expect(p(`import { Agent } from "@mastra/core/agent";`)).toBe('mastra');
    expect(p(`import type { LanguageModel } from 'ai';`)).toBe('mastra');
    expect(p(`export { openai } from '@ai-sdk/openai';`)).toBe('mastra');
    expect(p(`import '@mastra/core';`)).toBe('mastra');
    expect(p(`const { Agent } = await import('@mastra/core/agent');`)).toBe('mastra');
    expect(p(`const ai = require("ai");`)).toBe('mastra');
    expect(p(`import {\n  Agent,\n} from\n  '@mastra/core/agent';`)).toBe('mastra');
    // Names that only look alike: not the framework.
    expect(p(`import x from 'aix'; import y from '@ai-sdk-fake/x'; import z from 'mastra'; import w from './ai';`)).toBe('plain');
    expect(p(`import { z } from 'zod';`)).toBe('plain'); // zod alone is cheap: no framework memory for it
  });

  it('each import form of Python, indented ones too', () => {
    const p = (code: string) => importProfile('python', { 'main.py': code });
    expect(p('import langgraph')).toBe('langgraph');
    expect(p('import os, langchain_core.messages as m')).toBe('langgraph');
    expect(p('from langchain.agents import create_agent')).toBe('langgraph');
    expect(p('def handler(input):\n    from langgraph.graph import StateGraph\n    return {}')).toBe('langgraph');
    expect(p('import langsmith')).toBe('langgraph');
    expect(p('import openai')).toBe('plain');
    expect(p('import langgraphx\nfrom mylanggraph import x\nx = "langgraph"')).toBe('plain');
    expect(importedModules('python', 'import a.b as c, d\nfrom . import e\nfrom .f import g')).toEqual(['a.b', 'd', '.', '.f']);
  });

  it('an import inside a comment or a string counts (a guess: it costs time, never behaviour)', () => {
    expect(importProfile('bun', { 'index.ts': `// import { Agent } from '@mastra/core/agent';\nexport default () => 1;` })).toBe('mastra');
    expect(importProfile('bun', { 'index.ts': 'const s = "import ai from \'ai\'";' })).toBe('mastra');
    expect(importProfile('python', { 'main.py': '"""\nimport langgraph\n"""\ndef handler(i): return {}' })).toBe('langgraph');
    expect(importProfile('python', { 'main.py': '# import langgraph\ndef handler(i): return {}' })).toBe('plain'); // not at a line start
  });

  it("only the runtime's own source files are read, any file of the bundle", () => {
    expect(importProfile('bun', { 'index.ts': 'export default () => 1;', 'lib/agent.mjs': "import '@mastra/core';" })).toBe('mastra');
    expect(importProfile('bun', { 'index.ts': 'export default () => 1;', 'README.md': "import '@mastra/core';" })).toBe('plain');
    expect(importProfile('python', { 'main.py': 'import tools', 'tools.py': 'import langgraph' })).toBe('langgraph');
    expect(importProfile('python', { 'main.py': 'x = 1', 'notes.ts': "import 'ai';" })).toBe('plain');
  });

  it('a Bun bundle with its own node_modules is plain (its imports resolve there, not to the preloaded copies)', () => {
    expect(importProfile('bun', { 'index.ts': "import 'ai';", 'node_modules/ai/index.js': '' })).toBe('plain');
  });

  it('top-level module names of a Python bundle (what a fresh runner would let shadow a framework module)', () => {
    expect(topLevelModules({ 'main.py': '', 'secrets.py': '', 'pkg/__init__.py': '', 'pkg/x.py': '', 'README.md': '' }).sort()).toEqual([
      'main',
      'pkg',
      'secrets',
    ]);
  });

  it('every preload is an import its profile matches', () => {
    for (const fw of Object.values(FRAMEWORKS)) {
      for (const m of fw.preload.filter((m) => m !== 'zod')) expect(fw.imports.test(m), m).toBe(true);
    }
  });
});
