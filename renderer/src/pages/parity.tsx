import { EmptyState, PageHeader } from '../ui/kit';

export function Parity(_props: { params: string[] }) {
  return (
    <>
      <PageHeader title="Parity status" />
      <EmptyState title="Not built yet">This page arrives with the GUI issue.</EmptyState>
    </>
  );
}
