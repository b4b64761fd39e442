import { EmptyState, PageHeader } from '../ui/kit';

export function Egress(_props: { params: string[] }) {
  return (
    <>
      <PageHeader title="Egress" />
      <EmptyState title="Not built yet">This page arrives with the GUI issue.</EmptyState>
    </>
  );
}
