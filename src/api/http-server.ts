// How every Stele server runs HTTP (the API, the witness, the mirror): Node's own parse
// errors and CONNECT, which never reach a handler, are answered in the JSON error shape
// (src/api/edge.ts), and idle connections outlive a load balancer's.
import { type RequestListener, type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clientErrorHandler, connectHandler } from './edge.js';

/**
 * Above the idle timeout of the load balancers put in front (ALB: 60 s), so they, not we,
 * close an idle connection: none sends a request on a socket the server is closing.
 */
export const KEEP_ALIVE_MS = 65_000;

export interface HttpServer {
  readonly server: Server;
  /** `http://host:port`, an IPv6 host in brackets. */
  readonly url: string;
  /** Stops listening and ends every connection, idle or busy; resolves once all are closed. */
  close(): Promise<void>;
}

/** Listens on host:port (0: any free port); rejects if the port cannot be bound. */
export function listenHttp(handler: RequestListener, host: string, port: number): Promise<HttpServer> {
  return new Promise((resolve, reject) => {
    const server = createServer(handler);
    server.keepAliveTimeout = KEEP_ALIVE_MS;
    server.on('clientError', clientErrorHandler);
    server.on('connect', connectHandler);
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const bound = (server.address() as AddressInfo).port;
      resolve({
        server,
        url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}`,
        close: () =>
          new Promise<void>((closed) => {
            server.close(() => closed());
            server.closeAllConnections();
          }),
      });
    });
  });
}
