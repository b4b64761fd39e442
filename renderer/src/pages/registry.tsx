// Every page of the GUI: its route segment, its navigation label, and its component. A page lives in
// its own file; adding one is a line here.
import { lazy, type ComponentType } from 'react';
import { Overview } from './overview';
import { Snippets } from './snippets';
import { SnippetPage } from './snippet';
import { Invocations } from './invocations';
import { InvocationPage } from './invocation';
import { StreamInspector } from './stream';
import { Secrets } from './secrets';
import { Store } from './store';
import { Inbox } from './inbox';
import { Egress } from './egress';
import { Tenants } from './tenants';
import { Parity } from './parity';
import { StatePage } from './state';

// xterm.js is a third of the GUI's code and only this page needs it: it loads when first opened.
const Terminal = lazy(() => import('./terminal').then((m) => ({ default: m.Terminal })));

export interface PageDef {
  page: string;
  /** In the sidebar (absent: reached from another page only). */
  nav?: string;
  component: ComponentType<{ params: string[] }>;
}

export const PAGES: PageDef[] = [
  { page: '', nav: 'Overview', component: Overview },
  { page: 'snippets', nav: 'Snippets', component: Snippets },
  { page: 'snippet', component: SnippetPage },
  { page: 'invocations', nav: 'Invocations', component: Invocations },
  { page: 'invocation', component: InvocationPage },
  { page: 'stream', nav: 'Live streams', component: StreamInspector },
  { page: 'secrets', nav: 'Secrets', component: Secrets },
  { page: 'store', nav: 'Store', component: Store },
  { page: 'inbox', nav: 'Callback inbox', component: Inbox },
  { page: 'egress', nav: 'Egress', component: Egress },
  { page: 'terminal', nav: 'Terminal', component: Terminal },
  { page: 'tenants', nav: 'Tenants and caps', component: Tenants },
  { page: 'data', nav: 'Export / import', component: StatePage },
  { page: 'parity', nav: 'Parity status', component: Parity },
];
