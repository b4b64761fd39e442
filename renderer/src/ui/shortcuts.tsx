// Keyboard shortcuts: `g` then a letter goes to a page, `/` focuses the page's search or filter, `?` opens
// the list of shortcuts (Escape closes it). Keys typed into a field, the code view (CodeMirror) or the
// terminal (xterm) are never taken, nor keys with Ctrl, Alt or Meta.
import { useEffect, useRef } from 'react';

/** The letter after `g` for each page that has one (pages not listed here simply have no shortcut). */
export const GO_KEYS: Record<string, string> = {
  '': 'o',
  snippets: 's',
  invocations: 'i',
  stream: 'l',
  secrets: 'k',
  store: 'd',
  inbox: 'c',
  egress: 'e',
  tenants: 't',
  parity: 'p',
  terminal: 'x',
};

export interface GoShortcut {
  key: string;
  page: string;
  label: string;
}

/** The `g` shortcuts of the pages in the sidebar, in its order. */
export function goShortcuts(pages: { page: string; nav?: string }[]): GoShortcut[] {
  return pages.flatMap((p) => (p.nav && GO_KEYS[p.page] ? [{ key: GO_KEYS[p.page]!, page: p.page, label: p.nav }] : []));
}

/** How long `g` waits for its letter. */
const SEQUENCE_MS = 1500;

const NOT_TEXT = new Set(['checkbox', 'radio', 'button', 'submit', 'reset', 'range', 'color', 'file', 'image']);

/** Whether a key pressed in `target` belongs to what the user is typing (or to an editor or terminal). */
export function isTyping(target: EventTarget | null): boolean {
  if (!(target instanceof Element)) return false;
  if (target instanceof HTMLInputElement) return !NOT_TEXT.has(target.type);
  if (target.closest('textarea, select, [contenteditable]:not([contenteditable="false"]), .cm-editor, .xterm')) return true;
  return false;
}

/** The page's first search or filter control: a `role=search` region's field, a search input, or one marked `data-shortcut="filter"`. */
export function firstFilter(root: ParentNode = document): HTMLElement | null {
  return root.querySelector<HTMLElement>(
    'main [role="search"] :is(input, select, textarea), main input[type="search"], main [data-shortcut="filter"]',
  );
}

export function useShortcuts({
  shortcuts,
  go,
  toggleHelp,
}: {
  shortcuts: GoShortcut[];
  go: (page: string) => void;
  toggleHelp: () => void;
}): void {
  const latest = useRef({ shortcuts, go, toggleHelp });
  latest.current = { shortcuts, go, toggleHelp };
  useEffect(() => {
    let gAt = 0;
    function onKey(e: KeyboardEvent) {
      if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey || e.isComposing) return;
      if (e.key === 'Shift' || e.key === 'Control' || e.key === 'Alt' || e.key === 'Meta') return;
      const { shortcuts, go, toggleHelp } = latest.current;
      if (isTyping(e.target)) {
        gAt = 0;
        return;
      }
      const pending = gAt !== 0 && performance.now() - gAt < SEQUENCE_MS;
      gAt = 0;
      const dialogOpen = document.querySelector('dialog[open]') !== null;
      if (e.key === '?') {
        e.preventDefault();
        toggleHelp();
        return;
      }
      if (dialogOpen) return;
      if (pending) {
        const hit = shortcuts.find((s) => s.key === e.key.toLowerCase());
        if (hit) {
          e.preventDefault();
          go(hit.page);
        }
        return;
      }
      if (e.key === 'g') {
        gAt = performance.now();
        return;
      }
      if (e.key === '/') {
        const filter = firstFilter();
        if (filter) {
          e.preventDefault();
          filter.focus();
        }
      }
    }
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, []);
}

/** The list of shortcuts, in a modal dialog: Escape or Close shuts it and focus returns where it was. */
export function ShortcutsHelp({ open, onClose, shortcuts }: { open: boolean; onClose: () => void; shortcuts: GoShortcut[] }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);
  return (
    <dialog
      ref={ref}
      className="help-dialog"
      aria-labelledby="shortcuts-title"
      data-testid="shortcuts-help"
      onClose={onClose}
      onClick={(e) => {
        if (e.target === e.currentTarget) onClose(); // a click on the backdrop
      }}
    >
      <div className="help-body">
        <div className="help-head">
          <h2 id="shortcuts-title">Keyboard shortcuts</h2>
          <button type="button" className="help-close" onClick={onClose}>
            Close
          </button>
        </div>
        <table>
          <tbody>
            {shortcuts.map((s) => (
              <tr key={s.page}>
                <td>
                  <kbd>g</kbd> <kbd>{s.key}</kbd>
                </td>
                <td>Go to {s.label}</td>
              </tr>
            ))}
            <tr>
              <td>
                <kbd>/</kbd>
              </td>
              <td>Focus the page’s search or filter</td>
            </tr>
            <tr>
              <td>
                <kbd>?</kbd>
              </td>
              <td>Show or hide this list</td>
            </tr>
            <tr>
              <td>
                <kbd>Esc</kbd>
              </td>
              <td>Close this list or the menu</td>
            </tr>
            <tr>
              <td>
                <kbd>Shift</kbd>+<kbd>Esc</kbd>
              </td>
              <td>Leave the terminal (Tab there belongs to the shell)</td>
            </tr>
          </tbody>
        </table>
        <p className="help-note">
          Shortcuts wait while you type in a field, the code view or the terminal. Tab moves through the page; the first Tab offers “Skip to
          content”.
        </p>
      </div>
    </dialog>
  );
}
