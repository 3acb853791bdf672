"""What an episode runs against: the eight domain services (`domains/`), the fault proxy
in front of them (`proxy/`) and the stack image (`images/`). They share only the contract
with the env, across process boundaries."""
