# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import (
    NvidiaSmiParseError,
    parse_nvsmi_xml,
)


def nvidia_smi_xml(data, include_supported_clocks=True):
    """Parse ``nvidia-smi -q -x`` text into the ``ansible_facts.nvidia`` structure (without present/error)."""
    if isinstance(data, bytes):
        data = to_text(data, errors='surrogate_or_strict')
    if not isinstance(data, str):
        raise AnsibleFilterError(
            'nvidia_smi_xml: input must be the text nvidia-smi -q -x printed, got {0}'.format(type(data).__name__))
    if not isinstance(include_supported_clocks, bool):
        raise AnsibleFilterError('nvidia_smi_xml: include_supported_clocks must be a boolean, got {0!r}'.format(
            include_supported_clocks))
    try:
        return parse_nvsmi_xml(data, include_supported_clocks=include_supported_clocks)
    except NvidiaSmiParseError as exc:
        raise AnsibleFilterError('nvidia_smi_xml: {0}'.format(exc))


class FilterModule(object):
    def filters(self):
        return {'nvidia_smi_xml': nvidia_smi_xml}
