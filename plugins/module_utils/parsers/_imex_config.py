# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""What the node needs of NVIDIA IMEX's formats to know what to read: the daemon's config file (``KEY=value``
lines; NVIDIA IMEX guide, "IMEX Service Config Options"), the node list it names (``IMEX_NODE_CONFIG_FILE``, default
``/etc/nvidia-imex/nodes_config.cfg``) and the channel device's path (``/dev/nvidia-caps-imex-channels/channelN``).
The rest (the node list, ``/proc/devices``, ``nvidia-imex-ctl -N -j``) is parsers/_imex_formats.py, run where the
facts are resolved.  Sources: tests/testbed/REALITY.md, "IMEX".

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

CONFIG_PATH = '/etc/nvidia-imex/config.cfg'
NODES_CONFIG_PATH = '/etc/nvidia-imex/nodes_config.cfg'
CHANNEL_DIR = '/dev/nvidia-caps-imex-channels'


class ImexError(Exception):
    """An IMEX file or output that cannot be read as NVIDIA documents it (the message says what and where)."""


def channel_path(minor):
    """The device node of IMEX channel ``minor`` (the IMEX guide: /dev/nvidia-caps-imex-channels/channelN)."""
    return '{0}/channel{1}'.format(CHANNEL_DIR, int(minor))


_KEY_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


def parse_config(text):
    """``{KEY: value}`` of an IMEX config file (``KEY=value`` lines; ``#`` comments and blank lines skipped; the last
    line of a key wins, values stripped).  ImexError for a line that is neither."""
    values = {}
    for lineno, line in enumerate((text or '').splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith('#'):
            continue
        key, sep, value = stripped.partition('=')
        key = key.strip()
        if not sep or not _KEY_RE.match(key):
            raise ImexError('line {0}: {1!r} is not KEY=value'.format(lineno, line))
        values[key] = value.strip()
    return values


def nodes_config_path(values):
    """The node list the daemon reads: ``IMEX_NODE_CONFIG_FILE``, or NVIDIA's default when unset or empty."""
    return ((values or {}).get('IMEX_NODE_CONFIG_FILE') or '').strip() or NODES_CONFIG_PATH
