#!/bin/sh
# A stand-in for ssh in the --hostfile tests (--ssh-command): `fake_ssh.sh
# HOST COMMAND` runs COMMAND here with sh, as sshd runs it on HOST, with
# HOST in FAKE_SSH_HOST, in a session of its own and waited for: killing this
# process leaves the command running, as killing ssh leaves a remote command
# running until its input ends. Exits as the command does.
host=$1
command=$2
FAKE_SSH_HOST=$host exec setsid --wait sh -c "$command"
