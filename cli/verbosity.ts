// -q / -v: how much a command prints. Quiet silences the human text on stdout (JSON
// documents and errors still appear); verbose traces each HTTP exchange on stderr.
import diagnostics from 'node:diagnostics_channel';

export type Verbosity = 'quiet' | 'normal' | 'verbose';

let level: Verbosity = 'normal';

export function setVerbosity(v: Verbosity): void {
  level = v;
}

export function isQuiet(): boolean {
  return level === 'quiet';
}

interface UndiciRequest {
  method: string;
  origin: string;
  path: string;
}

let tracing = false;

/** Prints `→ GET url` and `← 200 GET url (12 ms)` for every fetch (undici's diagnostics channels). */
export function traceHttp(): void {
  if (tracing) return;
  tracing = true;
  const started = new WeakMap<object, number>();
  const url = (r: UndiciRequest) => `${r.origin}${r.path}`;
  diagnostics.subscribe('undici:request:create', (m) => {
    const { request } = m as { request: UndiciRequest };
    started.set(request, performance.now());
    process.stderr.write(`→ ${request.method} ${url(request)}\n`);
  });
  diagnostics.subscribe('undici:request:headers', (m) => {
    const { request, response } = m as { request: UndiciRequest; response: { statusCode: number } };
    const ms = Math.round(performance.now() - (started.get(request) ?? performance.now()));
    process.stderr.write(`← ${response.statusCode} ${request.method} ${url(request)} (${ms} ms)\n`);
  });
  diagnostics.subscribe('undici:client:connectError', (m) => {
    const { connectParams, error } = m as { connectParams: { host: string; protocol: string }; error: Error };
    process.stderr.write(`✗ connect ${connectParams.protocol}//${connectParams.host}: ${error.message}\n`);
  });
  diagnostics.subscribe('undici:request:error', (m) => {
    const { request, error } = m as { request: UndiciRequest; error: Error };
    process.stderr.write(`✗ ${request.method} ${url(request)}: ${error.message}\n`);
  });
}
