import { z } from 'zod';
import { defineOperation } from '../operation';
import { ok, problems } from '../responses';

/**
 * The GUI's session: opening a GUI URL with `?token=<admin token>` sets the `svc_emu_session` cookie
 * (HttpOnly, SameSite=Strict, kept across restarts of the same data dir), which authenticates `/_emu` like the
 * admin token (never `/v1`). Rotating its secret signs every browser out.
 */
export const GuiSessionView = z
  .object({
    signed_in: z.boolean().meta({ description: 'Whether this request carries this run’s admin token or a current session cookie.' }),
    via: z.enum(['token', 'cookie']).nullable().meta({ description: 'How this request was authenticated (null: it was not).' }),
    admin_token: z.string().nullable().meta({
      description:
        'Signed in: this run’s admin token (it changes at every start), what the GUI sends as `X-Emu-Admin` beside `X-Emu-Limits` on `/v1`, where the cookie is never accepted. Null otherwise.',
    }),
  })
  .meta({ id: 'GuiSessionView' });

export const GuiSessionRotated = z
  .object({
    sign_in_url: z.string().meta({ description: 'The URL that signs a browser in again (`/?token=…`, this run’s admin token).' }),
  })
  .meta({ id: 'GuiSessionRotated' });

export const emuGuiSession = defineOperation({
  operationId: 'emuGuiSession',
  method: 'get',
  path: '/_emu/gui-session',
  auth: 'none',
  tag: 'Emulator',
  summary: 'Whether this request is signed in (the GUI asks before anything else), and if so this run’s admin token (for X-Emu-Admin)',
  description:
    'Unauthenticated on purpose: a browser that is not signed in learns only `signed_in: false` (so the GUI shows its sign-in page without a failed request).',
  responses: { 200: ok('The session.', GuiSessionView) },
});

export const emuRotateGuiSession = defineOperation({
  operationId: 'emuRotateGuiSession',
  method: 'post',
  path: '/_emu/gui-session/rotate',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'A new GUI session secret: every browser is signed out (`svc-emu gui-token rotate`)',
  responses: { 200: ok('Rotated: the URL to sign in again.', GuiSessionRotated), ...problems(401) },
});
