import { EmptyState, PageHeader } from '../ui/kit';

export function InvocationPage(_props: { params: string[] }) {
  return (
    <>
      <PageHeader title="Invocation" />
      <EmptyState title="Not built yet">This page arrives with the GUI issue.</EmptyState>
    </>
  );
}
