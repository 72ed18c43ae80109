// Long-running commands (serve, control serve, witness serve) run until SIGTERM or SIGINT,
// then close what they started; a failed close is logged, never thrown past the command.
import type { Logger } from 'pino';

/** Resolves once `server` has closed after the first SIGTERM or SIGINT. */
export function closeOnSignal(server: { close(): Promise<void> }, log: Logger, message: string): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = () => {
      log.info(message);
      server.close().then(resolve, (e: unknown) => {
        log.error({ err: (e as Error).message }, 'shutdown failed');
        resolve();
      });
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
}
