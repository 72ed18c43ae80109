// The verifier: docs/interface.md §4.3's rules, each in one file, under one set of names (rules.ts), and
// the report whose verdict cannot read PASS unless the claim was checked (report.ts).
export * from './rules.js';
export * from './report.js';
export * from './witnesses.js';
export * from './checkpoint.js';
export * from './consistency.js';
export * from './entry.js';
export * from './inclusion.js';
export * from './tlog-proof.js';
