// How every Stele server runs HTTP (the API, the witness, the mirror): Node's own parse
// errors and CONNECT, which never reach a handler, are answered in the JSON error shape
// (src/http/request-rules.ts), and idle connections outlive a load balancer's.
import { type RequestListener, type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clientErrorHandler, connectHandler } from './request-rules.js';

/**
 * Above the idle timeout of the load balancers put in front (ALB: 60 s), so they, not we,
 * close an idle connection: none sends a request on a socket the server is closing.
 */
const KEEP_ALIVE_MS = 65_000;

/** Why an address could not be bound, in words (Node says `listen EADDRINUSE: …`). */
const CANNOT_LISTEN: Readonly<Record<string, string>> = {
  EADDRINUSE: 'the address is already in use (another server on that port?); choose another with --port',
  EACCES: 'permission denied (a port below 1024 needs privileges)',
  EADDRNOTAVAIL: 'no network interface of this machine has that address',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'the host name could not be resolved now',
};

/** The server could not bind its address; nothing was started. */
export class ListenError extends Error {
  override readonly name = 'ListenError';
  constructor(
    readonly address: string,
    readonly code: string | undefined,
    reason: string,
  ) {
    super(`cannot listen on ${address}: ${reason}`);
  }
}

export interface HttpServer {
  readonly server: Server;
  /** `http://host:port`, an IPv6 host in brackets. */
  readonly url: string;
  /** Stops listening and ends every connection, idle or busy; resolves once all are closed. */
  close(): Promise<void>;
}

/** Listens on host:port (0: any free port); rejects with a ListenError if it cannot. */
export function listenHttp(handler: RequestListener, host: string, port: number): Promise<HttpServer> {
  const name = host.includes(':') ? `[${host}]` : host; // an IPv6 address in a URL
  return new Promise((resolve, reject) => {
    const server = createServer(handler);
    server.keepAliveTimeout = KEEP_ALIVE_MS;
    server.on('clientError', clientErrorHandler);
    server.on('connect', connectHandler);
    const refused = (e: NodeJS.ErrnoException) =>
      reject(new ListenError(`${name}:${port}`, e.code, (e.code && CANNOT_LISTEN[e.code]) || e.message));
    server.once('error', refused);
    server.listen(port, host, () => {
      server.off('error', refused);
      resolve({
        server,
        url: `http://${name}:${(server.address() as AddressInfo).port}`,
        close: () =>
          new Promise<void>((closed) => {
            server.close(() => closed());
            server.closeAllConnections();
          }),
      });
    });
  });
}
