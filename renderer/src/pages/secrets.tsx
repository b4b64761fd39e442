import { EmptyState, PageHeader } from '../ui/kit';

export function Secrets(_props: { params: string[] }) {
  return (
    <>
      <PageHeader title="Secrets" />
      <EmptyState title="Not built yet">This page arrives with the GUI issue.</EmptyState>
    </>
  );
}
