import { implement } from '../http/route';
import * as guiSession from '../../contract/emu/gui-session';

/** The GUI session's handlers (their specs: contract/emu/gui-session.ts; the cookie itself: server/http/gui-session.ts). */
export const guiSessionRoutes = [
  implement(guiSession.emuGuiSession, ({ services, ctx }) => {
    const viaToken = /^Bearer \S+$/i.test(ctx.get('authorization')) || ctx.get('x-emu-admin') !== '';
    return { status: 200, body: { via: viaToken ? 'token' : 'cookie', admin_token: services.facts.adminToken } } as const;
  }),
  implement(guiSession.emuRotateGuiSession, async ({ services }) => {
    await services.facts.guiSession.rotate();
    return { status: 200, body: { sign_in_url: `${services.facts.url()}/?token=${services.facts.adminToken}` } };
  }),
];
