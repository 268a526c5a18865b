# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The one command runner of the collection's modules and module_utils.

Every command a module runs on a node goes through run(): an argv list (a string is refused), the C locale always
(LC_ALL=C, LANGUAGE=C: the parsers read English, untranslated output), no expansion of ``~`` or ``$VAR`` in the
arguments, undecodable bytes replaced.  It runs the command with ``AnsibleModule.run_command``, never with its own
subprocess, and takes the module only for ``run_command`` and ``get_bin_path`` (no Ansible import here).

A timeout is coreutils timeout(1) around the command, because run_command has none in any ansible-core.  From the
coreutils manual (info coreutils 'timeout invocation', coreutils 8.30 of EL8 to 9.x):

- without ``--foreground``, timeout runs the command in a separate background process group and signals that group
  (the manual's ``--foreground`` entry: "in this mode of operation, any children of COMMAND will not be timed out",
  so in the default mode they are): a hung nvidia-smi leaves no children;
- ``--kill-after=D`` also sends KILL D seconds after the first signal (TERM here), for a command that ignores TERM;
- exit status 124 "if COMMAND times out" (TERM sufficed), 125 if timeout itself fails, 126 "if COMMAND is found but
  cannot be invoked", 127 "if COMMAND cannot be found", 137 if COMMAND or timeout is sent KILL (128+9).  timeout sends
  that KILL to its whole process group, itself included, so run_command (subprocess) reports the death by signal as
  rc -9; a shell would print 137.  Both count as a timeout, and only when the timeout has passed (a command killed by
  someone else before it, or one that exits 124 itself, is not reported as timed out).

Every command also has a limit when the module that runs it has the option ``command_timeout`` (gpu_node_facts and
readiness_info: the play's ``nodeprep_command_timeout``): run() and run_status() give a command without a limit of its
own that one (``command_limit``), so that a hung systemctl, rpm or ethtool costs the node that limit, not the run.
Each command killed at its limit is remembered for the module's result (``timed_out_commands``).

The commands run with a timeout of their own are nvidia-smi, systemctl and dcgmi (readiness_info, gpu.dcgm_diag).  nvidia-smi's
documented return values (nvidia-smi(1), RETURN VALUE: 0, 2, 3, 4, 6, 8, 9, 10, 12, 13, 14, 15 and 255) and
systemctl's (0 to 4) do not collide with 124 to 127 or 137; dcgmi exits with its dcgmReturn_t as a byte (0, or 256
minus the code: DCGM_ST_* run from -1 to -67 in NVIDIA/DCGM v4.6.0 dcgmlib/dcgm_structs.h, so 189 to 255).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import os
import time

from collections import namedtuple

C_LOCALE = {'LC_ALL': 'C', 'LANGUAGE': 'C'}
# Seconds between timeout(1)'s TERM and its KILL.
KILL_AFTER = 5
TIMED_OUT_RCS = (124, 128 + 9, -9)
# What timeout(1) prints (C locale) when it cannot start the command, with rc 126 or 127.
_NOT_STARTED = 'failed to run command'
# The clock the runner measures with (tests replace it).
monotonic = time.monotonic
# The module option that holds the limit of every command run without a limit of its own.
LIMIT_OPTION = 'command_timeout'
# The commands this module process killed at their limit: {'command', 'seconds', 'option'} each (one module
# execution is one process; tests reset it with forget_timeouts()).
_TIMED_OUT = []


class CommandError(Exception):
    """A command could not be run; ``argv`` is the command as the caller gave it."""

    def __init__(self, argv, message):
        self.argv = list(argv)
        super(CommandError, self).__init__(message)


class CommandNotFound(CommandError):
    """The binary (or timeout(1), for a command with a timeout) is missing or cannot be executed."""


class Result(namedtuple('Result', ['argv', 'rc', 'stdout', 'stderr', 'timed_out'])):
    """What a command did: ``argv`` as given (without timeout(1)), ``rc``, ``stdout`` and ``stderr`` as text, and
    ``timed_out`` (it and its process group were killed after ``timeout`` seconds; ``rc`` is then 124 or -9)."""

    __slots__ = ()


def check_argv(argv):
    """``argv`` as a list of strings; a string (a shell command line) or anything else but a non-empty list or tuple
    of strings and numbers is refused with TypeError or ValueError."""
    if isinstance(argv, (str, bytes)):
        raise TypeError('a command is an argv list, never a shell string: got {0!r}'.format(argv))
    if not isinstance(argv, (list, tuple)) or not argv:
        raise TypeError('a command is a non-empty argv list, got {0!r}'.format(argv))
    words = []
    for arg in argv:
        if isinstance(arg, bool) or not isinstance(arg, (str, int, float)):
            raise TypeError('argv {0!r}: {1!r} is not a string or a number'.format(list(argv), arg))
        words.append(str(arg))
    if not words[0]:
        raise ValueError('argv {0!r}: the command is empty'.format(list(argv)))
    return words


def _text(data):
    if data is None:
        return ''
    if isinstance(data, bytes):
        return data.decode('utf-8', 'replace')
    return data


def timeout_argv(timeout_bin, timeout, argv, kill_after=KILL_AFTER):
    """timeout(1) around ``argv``: TERM to the command's process group after ``timeout`` seconds, KILL
    ``kill_after`` seconds later."""
    return [timeout_bin, '--kill-after={0}'.format(kill_after), '--signal=TERM', '{0}'.format(timeout)] + list(argv)


def command_limit(module):
    """The module's per-command limit in seconds (its option ``command_timeout``), or None when it has none."""
    params = getattr(module, 'params', None)
    value = params.get(LIMIT_OPTION) if isinstance(params, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return value


def timed_out_commands():
    """The commands killed at their limit so far in this module process, oldest first."""
    return [dict(item) for item in _TIMED_OUT]


def forget_timeouts():
    del _TIMED_OUT[:]


def limit_text(argv, seconds, option=LIMIT_OPTION):
    """The words of a command killed at its limit."""
    return '{0} did not answer within {1} seconds ({2}) and was killed'.format(' '.join(argv), seconds, option)


def run(module, argv, timeout=None, env=None, kill_after=KILL_AFTER, option=None):
    """Run ``argv`` (a list) with LC_ALL=C and LANGUAGE=C (``env`` adds variables; it cannot change those two) and
    return a Result.

    ``timeout`` (seconds, a positive number) runs it under timeout(1): on expiry its whole process group is sent TERM,
    then KILL ``kill_after`` seconds later, and the Result has ``timed_out`` true with what it printed until then.
    Without ``timeout``, the module's ``command_timeout`` (command_limit) is the limit, when it has one. ``option``
    names the option the limit came from in timed_out_commands() (default: the caller's ``timeout``, or
    ``command_timeout``).
    Raises CommandNotFound when the binary (or timeout(1)) is missing or cannot be executed.
    """
    words = check_argv(argv)
    if timeout is None:
        timeout = command_limit(module)
        option = option or (LIMIT_OPTION if timeout is not None else None)
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ValueError('{0}: timeout must be a positive number of seconds, got {1!r}'.format(' '.join(words), timeout))
    environ = dict(env or {})
    environ.update(C_LOCALE)
    command = words
    if timeout is not None:
        timeout_bin = module.get_bin_path('timeout')
        if not timeout_bin:
            raise CommandNotFound(words, 'cannot run {0} with a timeout: timeout (coreutils) was not found in '
                                         'PATH'.format(' '.join(words)))
        command = timeout_argv(timeout_bin, timeout, words, kill_after)
    started = monotonic()
    try:
        rc, out, err = module.run_command(command, environ_update=environ, expand_user_and_vars=False,
                                          errors='replace', handle_exceptions=False)
    except (IOError, OSError) as exc:
        if exc.errno in (errno.ENOENT, errno.EACCES, errno.ENOEXEC, errno.ENOTDIR):
            # os.strerror: Python 3.6's subprocess adds the path to the exception's strerror, later ones do not.
            raise CommandNotFound(words, 'cannot run {0}: {1}'.format(words[0], os.strerror(exc.errno)))
        raise CommandError(words, 'cannot run {0}: {1}'.format(' '.join(words), exc))
    elapsed = monotonic() - started
    out, err = _text(out), _text(err)
    if timeout is not None:
        first = err.strip().splitlines()[0] if err.strip() else ''
        if rc in (126, 127) and _NOT_STARTED in first:
            raise CommandNotFound(words, 'cannot run {0}: {1}'.format(words[0], first.rsplit(': ', 1)[-1]))
        if rc in TIMED_OUT_RCS and elapsed >= timeout:
            _TIMED_OUT.append({'command': ' '.join(words), 'seconds': timeout, 'option': option or 'timeout'})
            return Result(words, rc, out, err, True)
    return Result(words, rc, out, err, False)


def run_status(module, argv, env=None):
    """``(rc, stdout, stderr)`` of run(), for readers that report a failed command and go on: a binary that cannot
    be run is rc 127 (the shell's "command not found") with the reason, naming the command, as stderr; a command
    killed at the module's per-command limit is rc 124 with limit_text() as stderr."""
    try:
        result = run(module, argv, env=env)
    except CommandNotFound as exc:
        return 127, '', str(exc)
    if result.timed_out:
        return 124, result.stdout, limit_text(result.argv, command_limit(module))
    return result.rc, result.stdout, result.stderr
