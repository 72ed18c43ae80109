// Settings the app is given (infra/app.ts's context), checked at synth so a mistake fails
// `cdk synth` with one line rather than a deployment.
import { PolicyError, parsePolicy } from '../../src/core/tlog-policy.js';

/** A setting the app cannot use: infra/app.ts prints it as one line and exits 2, no stack trace. */
export class AppSettingError extends Error {
  override name = 'AppSettingError';
}

/** The policy text, refused here if it is not a C2SP tlog-policy; ends in a newline, as a file does. */
export function checkedPolicy(text: string): string {
  try {
    parsePolicy(text);
  } catch (e) {
    if (e instanceof PolicyError) throw new AppSettingError(`context stele:witnessPolicy: ${e.message}`);
    throw e;
  }
  return text.endsWith('\n') ? text : `${text}\n`;
}
