import { EmptyState, PageHeader } from '../ui/kit';

export function Tenants(_props: { params: string[] }) {
  return (
    <>
      <PageHeader title="Tenants and caps" />
      <EmptyState title="Not built yet">This page arrives with the GUI issue.</EmptyState>
    </>
  );
}
