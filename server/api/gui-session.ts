import { implement } from '../http/route';
import { sessionAuthenticates } from '../http/gui-session';
import { secretEquals } from '../ids';
import * as guiSession from '../../contract/emu/gui-session';

/** The GUI session's handlers (their specs: contract/emu/gui-session.ts; the cookie itself: server/http/gui-session.ts). */
export const guiSessionRoutes = [
  implement(guiSession.emuGuiSession, ({ services, ctx }) => {
    const { adminToken, guiSession: session } = services.facts;
    const token = /^Bearer (\S+)$/i.exec(ctx.get('authorization'))?.[1] ?? ctx.get('x-emu-admin');
    const via = token ? (secretEquals(token, adminToken) ? 'token' : null) : sessionAuthenticates(ctx, session) ? 'cookie' : null;
    return { status: 200, body: { signed_in: via !== null, via, admin_token: via ? adminToken : null } } as const;
  }),
  implement(guiSession.emuRotateGuiSession, async ({ services }) => {
    await services.facts.guiSession.rotate();
    return { status: 200, body: { sign_in_url: `${services.facts.url()}/?token=${services.facts.adminToken}` } };
  }),
];
