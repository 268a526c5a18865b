# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The text of a file the node returned unparsed (collect/_node_state.read_raw), for the parser that reads it where
the facts are resolved: on the controller for gpu_node_facts, on the node for the standalone facts modules.

A record that is not what read_raw returns, or a text over the bound, is refused naming the host and the file.
Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import base64
import binascii
import errno

MISSING = (errno.ENOENT, errno.ENOTDIR)


def where(host, path):
    """``host node01: /proc/self/mountinfo`` (the file alone when the host is not known: a module on the node)."""
    return 'host {0}: {1}'.format(host, path) if host else path


def text_of(record, path, limit, error, host=None, required=False):
    """``(text, problem)`` of a record of read_raw: the text (bytes that are not UTF-8 as surrogate escapes, as the
    node read them) and None; None and None when the file does not exist (unless ``required``); None and why when the
    node could not read it (``cannot read <path>: <error>``) or it holds more than ``limit`` bytes.

    Raises ``error`` (the parser's exception class) naming the host and the file when the record is garbled or its
    text is longer than ``limit``: the node returns no more, so such a record did not come from the gather.
    """
    if not isinstance(record, dict):
        raise error('{0}: the node returned {1} instead of the file\'s text'.format(
            where(host, path), type(record).__name__))
    if isinstance(record.get('path'), str):
        path = record['path']
    if record.get('errno') is not None or record.get('error') is not None:
        if record.get('errno') in MISSING and not required:
            return None, None
        return None, 'cannot read {0}: {1}'.format(path, record.get('error'))
    if record.get('over_limit') is not None:
        return None, '{0} is larger than {1} bytes'.format(path, record['over_limit'])
    if isinstance(record.get('text'), str):
        data = record['text'].encode('utf-8', 'surrogateescape')
    elif isinstance(record.get('base64'), str):
        try:
            data = base64.b64decode(record['base64'].encode('ascii'), validate=True)
        except (ValueError, binascii.Error, UnicodeEncodeError):
            raise error('{0}: the node returned bytes that are not base64'.format(where(host, path)))
    else:
        raise error('{0}: the node returned neither text nor bytes (keys: {1})'.format(
            where(host, path), ', '.join(sorted(str(k) for k in record)) or 'none'))
    if len(data) > limit:
        raise error('{0}: {1} bytes, more than the {2} the gather returns'.format(where(host, path), len(data), limit))
    return data.decode('utf-8', 'surrogateescape'), None
