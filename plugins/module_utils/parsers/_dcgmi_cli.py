# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""What the gather needs of ``dcgmi`` (NVIDIA DCGM) on the node: the argv of ``dcgmi discovery -l`` and ``dcgmi diag -r
<level> -j``, and whether its output says that no host engine answers (then the diagnostic is not run).  The parsers
of the outputs, which only the controller needs, are parsers/_dcgmi.py.  Pure; Python 3.6 compatible.

Without a host engine dcgmi prints ``Error: unable to establish a connection to the specified host: localhost`` and
``Error: Unable to connect to host engine. Host engine connection invalid/disconnected.`` (NVIDIA/DCGM v3.3.9 and
v4.6.0, dcgmi/Command.cpp Connect and DoExecuteConnectionFailure).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

NO_HOST_ENGINE = ('Unable to connect to host engine', 'unable to establish a connection to the specified host')


def diag_argv(dcgmi, level):
    return [dcgmi, 'diag', '-r', str(level), '-j']


def discovery_argv(dcgmi):
    return [dcgmi, 'discovery', '-l']


def no_host_engine(text):
    """True when dcgmi's output says that no host engine answers."""
    return any(marker in (text or '') for marker in NO_HOST_ENGINE)
