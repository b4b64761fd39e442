// A read-only code view on CodeMirror 6: line numbers, syntax highlighting (TypeScript/JavaScript,
// Python), keyboard focusable, selectable. One editor per file shown; rebuilt when the file changes.
import { useEffect, useRef } from 'react';
import { EditorState, type Extension } from '@codemirror/state';
import { EditorView, highlightActiveLine, highlightActiveLineGutter, lineNumbers } from '@codemirror/view';
import { defaultHighlightStyle, syntaxHighlighting } from '@codemirror/language';
import { javascript } from '@codemirror/lang-javascript';
import { python } from '@codemirror/lang-python';

function languageOf(path: string): Extension {
  if (/\.py$/i.test(path)) return python();
  if (/\.[cm]?[jt]sx?$/i.test(path)) return javascript({ typescript: /\.[cm]?tsx?$/i.test(path), jsx: /x$/i.test(path) });
  return [];
}

const theme = EditorView.theme({
  '&': { fontSize: '13px', border: '1px solid var(--line)', borderRadius: '6px', background: 'var(--card)' },
  '.cm-scroller': { fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace', maxHeight: '560px', overflow: 'auto' },
  '.cm-gutters': { background: 'var(--bg)', color: 'var(--muted)', borderRight: '1px solid var(--line)' },
  '&.cm-focused': { outline: '2px solid #3b82f6', outlineOffset: '2px' },
});

export function ReadOnlyCode({ path, content, label, testid }: { path: string; content: string; label: string; testid?: string }) {
  const host = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!host.current) return;
    const view = new EditorView({
      parent: host.current,
      state: EditorState.create({
        doc: content,
        extensions: [
          lineNumbers(),
          highlightActiveLineGutter(),
          highlightActiveLine(),
          syntaxHighlighting(defaultHighlightStyle),
          languageOf(path),
          EditorState.readOnly.of(true),
          EditorView.editable.of(false),
          EditorView.contentAttributes.of({ 'aria-label': label, tabindex: '0' }),
          theme,
        ],
      }),
    });
    return () => view.destroy();
  }, [path, content, label]);
  return <div ref={host} data-testid={testid} />;
}
