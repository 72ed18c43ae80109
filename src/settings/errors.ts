// The error of a wrong setting (a flag, a variable, a configuration file), for every server
// and tool: the CLI reports it as a usage error (exit 2). Below every service, so the control
// plane's and the log server's settings share it.
export class ConfigError extends Error {
  override name = 'ConfigError';
}
