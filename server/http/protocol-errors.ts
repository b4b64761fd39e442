import { STATUS_CODES, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { ApiError } from '../errors';
import { newRequestId } from '../ids';
import { notImplemented, problemBody } from './problem';

/**
 * What never reaches Koa still answers problem+json: a request Node's HTTP parser refuses (a method HTTP
 * does not define, e.g. `FOO` → 501; headers too large → 431; chunk extensions too large → 413; anything
 * else malformed → 400) and a `CONNECT` (Node hands it to the `connect` event, not to the app: we are not
 * a proxy → 501). Node's own answers are bare status lines.
 */
export function answerProtocolErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // Node's default handler checks the same: a response already being written cannot take another.
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight) return void socket.destroy();
    socket.end(rawProblem(problemFor(err)));
  });
  server.on('connect', (_req, socket: Duplex) => {
    socket.on('error', () => socket.destroy());
    socket.end(rawProblem(notImplemented('CONNECT', 'this is the emulator’s API, not a proxy')));
  });
}

function problemFor(err: NodeJS.ErrnoException): ApiError {
  switch (err.code) {
    case 'HPE_INVALID_METHOD':
      return notImplemented('The request’s method', 'HTTP defines no such method');
    case 'HPE_HEADER_OVERFLOW':
      return new ApiError(
        431,
        'headers_too_large',
        'Request header fields too large',
        'the request’s headers are over the limit of this server',
      );
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new ApiError(
        413,
        'payload_too_large',
        'Payload too large',
        'the request’s chunk extensions are over the limit of this server',
      );
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ApiError(408, 'request_timeout', 'Request timeout', 'the request did not arrive in time');
    default:
      return new ApiError(400, 'bad_request', 'Bad request', `the request is not valid HTTP/1.1 (${err.code ?? 'parse error'})`);
  }
}

/** A whole HTTP/1.1 response with a problem+json body, for writing straight onto a socket. */
export function rawProblem(problem: ApiError): string {
  const requestId = newRequestId();
  const body = JSON.stringify(problemBody(problem, requestId));
  const headers = {
    'Content-Type': 'application/problem+json',
    'Content-Length': String(Buffer.byteLength(body)),
    'X-Request-Id': requestId,
    ...problem.headers,
    Connection: 'close',
  };
  const head = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status] ?? ''}\r\n${head}\r\n${body}`;
}
