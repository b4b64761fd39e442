import { main } from './main';
main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Completion answers within its 2 s budget (completion.ts) even when a request to a stuck core is still open.
    if (process.argv[2] === '__complete') process.exit(code);
  },
  (err: unknown) => {
    // main answers every expected failure with an exit code; this is a bug's stack, and a failed run.
    console.error(err);
    process.exitCode = 1;
  },
);
