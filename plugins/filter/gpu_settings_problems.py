# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_sequence
from ansible.module_utils.six import string_types

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._gpu_settings import settings_problems


def _plain(value):
    """Role variables arrive as AnsibleUnicode/AnsibleSequence/...; the rules take plain str/list/dict."""
    if isinstance(value, string_types):
        return str(value)
    if isinstance(value, dict):
        return dict((_plain(k), _plain(v)) for k, v in value.items())
    if is_sequence(value):
        return [_plain(v) for v in value]
    return value


def gpu_settings_problems(settings, prefix='nodeprep_gpu_settings_'):
    """Sentences naming each malformed GPU setting (the rules of nvidia_gpu); [] when all are usable."""
    if not isinstance(settings, dict):
        raise AnsibleFilterError('gpu_settings_problems: input must be a dict of role variables, got {0}'.format(
            type(settings).__name__))
    return settings_problems(_plain(settings), prefix)


class FilterModule(object):
    def filters(self):
        return {'gpu_settings_problems': gpu_settings_problems}
