// Errors of the ledger client. Each carries the kind of failure, which the CLI maps to its
// documented exit code (cli/errors.ts): verification → 1, usage/config → 2, network/io → 3.

export type ClientErrorKind = 'verify' | 'usage' | 'config' | 'network' | 'io';

export class ClientError extends Error {
  override name = 'ClientError';
  constructor(
    readonly kind: ClientErrorKind,
    message: string,
  ) {
    super(message);
  }
}

/** Something the log served did not verify (or was malformed): never trust it. */
export class VerificationError extends ClientError {
  override name = 'VerificationError';
  constructor(message: string) {
    super('verify', message);
  }
}

/** Bad or missing client configuration (the [ledger] file, its trust settings, a pinned key); a server's settings fail with settings/errors.ts's ConfigError. */
export class ClientConfigError extends ClientError {
  override name = 'ClientConfigError';
  constructor(message: string) {
    super('config', message);
  }
}

/** A bad argument given by the user. */
export class UsageError extends ClientError {
  override name = 'UsageError';
  constructor(message: string) {
    super('usage', message);
  }
}

/** The endpoint could not be reached, timed out, or answered with a server error. */
export class NetworkError extends ClientError {
  override name = 'NetworkError';
  constructor(message: string) {
    super('network', message);
  }
}

/** The server answered with an error document ({"error":{"code","message"}}). */
export class LogAnswerError extends ClientError {
  override name = 'LogAnswerError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly url: string,
  ) {
    super(status >= 500 || status === 429 ? 'network' : 'usage', message);
  }
}

/** A response that does not have the shape of the contract. */
export class ResponseError extends VerificationError {
  override name = 'ResponseError';
}
