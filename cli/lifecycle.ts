// Long-running commands (serve, control serve, witness serve) run until SIGTERM or SIGINT,
// then close what they started; a failed close is logged, never thrown past the command.
import type { Logger } from 'pino';

/**
 * Resolves once `server` has closed after the first SIGTERM or SIGINT. Call it before printing
 * the ready line: a supervisor may signal as soon as it reads that line, and until a handler
 * is installed a signal's default action ends the process on the spot, with nothing closed.
 */
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
