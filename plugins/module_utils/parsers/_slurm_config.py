# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""Slurm's configuration as ``scontrol show config`` prints it, and which resource limits Slurm propagates.

``scontrol show config`` prints one ``Key = Value`` line per setting (SchedMD/slurm src/api/config_info.c,
add_key_pair; the same in 22.05 and 24.11); a setting that holds no string prints ``(null)``.

Which limits a job gets from the shell it was submitted from (slurm.conf(5), PropagateResourceLimits and
PropagateResourceLimitsExcept; src/common/read_config.c calls src/common/slurm_rlimits_info.c parse_rlimits):

* PropagateResourceLimitsExcept given: the limits it lists are not propagated, every other one is (``ALL``: none is,
  ``NONE``: all are); PropagateResourceLimits is then not read (scontrol prints it as ``(null)``);
* otherwise PropagateResourceLimits, ``ALL`` when not set: the limits it lists are propagated, the others are not
  (``NONE``: none is);
* names are compared exactly, upper case, with or without ``RLIMIT_``, separated by commas, spaces or tabs; ``ALL``
  and ``NONE`` only as the whole value; any other word makes Slurm refuse the configuration.

Pure functions; no Ansible import (Python 3.6+).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

# slurm_rlimits_info.c rlimits_info[] (Linux has all of them).
RLIMIT_NAMES = ('CPU', 'FSIZE', 'DATA', 'STACK', 'CORE', 'RSS', 'NPROC', 'NOFILE', 'MEMLOCK', 'AS')
PROPAGATE = 'PropagateResourceLimits'
PROPAGATE_EXCEPT = 'PropagateResourceLimitsExcept'
UNSET = ('', '(null)')


def parse_show_config(text):
    """``Key = Value`` lines (a text or a list of lines) -> {key: value}; lines without `` = `` or whose key has a
    space (the title, section headers) are skipped."""
    lines = (text or '').splitlines() if not isinstance(text, list) else text
    out = {}
    for line in lines:
        key, sep, value = line.partition(' = ')
        if sep and key.strip() and ' ' not in key.strip():
            out[key.strip()] = value.strip()
    return out


def _names(key, value):
    if value in ('ALL', 'NONE'):
        return value
    names = set()
    for word in [w for w in re.split(r"[,\s]+", value) if w]:
        name = word[len('RLIMIT_'):] if word.startswith('RLIMIT_') else word
        if name not in RLIMIT_NAMES:
            raise ValueError('{0} = {1}: {2!r} is not a limit Slurm propagates (allowed: ALL, NONE, or a list of '
                             '{3})'.format(key, value, word, ', '.join(RLIMIT_NAMES)))
        names.add(name)
    return names


def propagated(config, name):
    """Whether Slurm gives a job the submitting shell's soft limit ``name`` (such as MEMLOCK), from the settings of
    parse_show_config; ValueError when neither setting was printed or a value is not one Slurm accepts."""
    if PROPAGATE not in config and PROPAGATE_EXCEPT not in config:
        raise ValueError('scontrol show config printed neither {0} nor {1}'.format(PROPAGATE, PROPAGATE_EXCEPT))
    value = config.get(PROPAGATE_EXCEPT)
    if value not in (None,) + UNSET:
        names = _names(PROPAGATE_EXCEPT, value)
        return names == 'NONE' or (names != 'ALL' and name not in names)
    value = config.get(PROPAGATE)
    names = _names(PROPAGATE, 'ALL' if value in (None,) + UNSET else value)
    return names == 'ALL' or (names != 'NONE' and name in names)
