import { EmptyState, PageHeader } from '../ui/kit';

export function Invocations(_props: { params: string[] }) {
  return (
    <>
      <PageHeader title="Invocations" />
      <EmptyState title="Not built yet">This page arrives with the GUI issue.</EmptyState>
    </>
  );
}
