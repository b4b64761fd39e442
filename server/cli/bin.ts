import { main } from './main';
main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // main answers every expected failure with an exit code; this is a bug's stack, and a failed run.
    console.error(err);
    process.exitCode = 1;
  },
);
