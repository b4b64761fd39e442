// What every page gets: the API client and what /_emu/info said at sign-in.
import { createContext, useContext } from 'react';
import type { Api } from './api';
import type { EmulatorInfo } from './session';

export interface AppContext {
  api: Api;
  info: EmulatorInfo;
}

export const Ctx = createContext<AppContext | null>(null);

export function useApp(): AppContext {
  const c = useContext(Ctx);
  if (!c) throw new Error('useApp outside the signed-in app');
  return c;
}
