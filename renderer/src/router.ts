// Hash routes (`#/snippets/hello/settings`): the GUI works from any URL the core serves it at.
import { useEffect, useState } from 'react';

export interface Route {
  /** The first path segment: the page (`''` is the overview). */
  page: string;
  /** The rest of the segments, decoded. */
  params: string[];
}

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('?')[0]!.split('/').filter(Boolean).map(decodeURIComponent);
  return { page: parts[0] ?? '', params: parts.slice(1) };
}

export const href = (...parts: (string | number)[]) => `#/${parts.map((p) => encodeURIComponent(String(p))).join('/')}`;

export function navigate(...parts: (string | number)[]): void {
  window.location.hash = href(...parts);
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(window.location.hash));
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}
