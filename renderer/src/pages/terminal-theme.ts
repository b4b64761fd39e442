// The terminal's colours, light and dark: the ANSI palette chosen to stay readable on each scheme's
// surface, and the background, text and cursor taken from the GUI's own tokens (styles.css --card, --fg)
// when they can be read, so the screen is the card it sits in.
import type { ITheme } from '@xterm/xterm';

export const TERMINAL_FONT = "ui-monospace, 'SF Mono', Menlo, Consolas, 'DejaVu Sans Mono', 'Liberation Mono', monospace";

export const LIGHT: ITheme = {
  background: '#ffffff',
  foreground: '#1d2330',
  cursor: '#1d2330',
  cursorAccent: '#ffffff',
  selectionBackground: 'rgba(37, 99, 235, 0.22)',
  black: '#1d2330',
  red: '#c52a2a',
  green: '#1a7f37',
  yellow: '#8a6100',
  blue: '#1f5fcc',
  magenta: '#8e3ab8',
  cyan: '#0f7a8a',
  white: '#6b7280',
  brightBlack: '#596170',
  brightRed: '#d9363e',
  brightGreen: '#238a43',
  brightYellow: '#a16b00',
  brightBlue: '#2563eb',
  brightMagenta: '#a347c7',
  brightCyan: '#138a9c',
  brightWhite: '#8b929c',
};

export const DARK: ITheme = {
  background: '#15171c',
  foreground: '#e6e8eb',
  cursor: '#e6e8eb',
  cursorAccent: '#15171c',
  selectionBackground: 'rgba(96, 165, 250, 0.32)',
  black: '#2d313a',
  red: '#f87171',
  green: '#4ade80',
  yellow: '#facc15',
  blue: '#60a5fa',
  magenta: '#c084fc',
  cyan: '#22d3ee',
  white: '#d1d5db',
  brightBlack: '#6b7280',
  brightRed: '#fca5a5',
  brightGreen: '#86efac',
  brightYellow: '#fde68a',
  brightBlue: '#93c5fd',
  brightMagenta: '#d8b4fe',
  brightCyan: '#67e8f9',
  brightWhite: '#ffffff',
};

export const DARK_QUERY = '(prefers-color-scheme: dark)';

/** The palette of the scheme, on the page's --card with its --fg (`read` gives a custom property's value). */
export function themeFor(dark: boolean, read: (name: string) => string = () => ''): ITheme {
  const base = dark ? DARK : LIGHT;
  const background = read('--card').trim() || base.background;
  const foreground = read('--fg').trim() || base.foreground;
  return { ...base, background, foreground, cursor: foreground, cursorAccent: background };
}
