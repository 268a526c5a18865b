# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""What every reader hands back to the controller: text made safe (to_display) and the base of the readers'
exceptions (FactsReadError: a message and, when a command failed, its cmd, rc, stdout and stderr).

No Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type


def to_display(text):
    """text safe to return to the controller: bytes that are not UTF-8 become \\x escapes.

    Accepts bytes, or str read with the surrogateescape error handler (os.listdir, glob, open(..., errors=...)).
    The controller refuses a result holding lone surrogates, so every file name and every byte read from a file
    goes through this before it is returned.
    """
    raw = text if isinstance(text, bytes) else text.encode('utf-8', 'surrogateescape')
    return raw.decode('utf-8', 'backslashreplace')


_UNSET = object()


class FactsReadError(Exception):
    """Base of a reader's exception: a message and, when a command failed, its cmd, rc, stdout and stderr.

    OUTPUT_DEFAULT is stdout and stderr when not given; fail_kwargs() leaves out the fields that are None unless
    KEEP_NONE is true.
    """

    OUTPUT_DEFAULT = None
    KEEP_NONE = False

    def __init__(self, msg, cmd=None, rc=None, stdout=_UNSET, stderr=_UNSET):
        super(FactsReadError, self).__init__(msg)
        self.msg = msg
        self.cmd = cmd
        self.rc = rc
        self.stdout = self.OUTPUT_DEFAULT if stdout is _UNSET else stdout
        self.stderr = self.OUTPUT_DEFAULT if stderr is _UNSET else stderr

    def fail_kwargs(self):
        """Keyword arguments for module.fail_json()."""
        kwargs = {'msg': self.msg}
        for key in ('cmd', 'rc', 'stdout', 'stderr'):
            value = getattr(self, key)
            if value is not None or self.KEEP_NONE:
                kwargs[key] = value
        return kwargs
