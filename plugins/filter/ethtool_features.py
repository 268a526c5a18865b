# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._ethtool import EthtoolError, parse_features


def ethtool_features(data):
    """``ethtool -k`` text -> {feature: {enabled, fixed[, requested]}}."""
    if not isinstance(data, (str, bytes)):
        raise AnsibleFilterError(
            'ethtool_features: input must be the text ethtool -k prints (a string), not {0}'.format(
                type(data).__name__))
    try:
        features = parse_features(to_text(data))
    except EthtoolError as exc:
        raise AnsibleFilterError('ethtool_features: {0}'.format(exc))
    return dict((name, dict(value)) for name, value in features.items())


class FilterModule(object):
    """gpufleet.nodeprep ethtool filters."""

    def filters(self):
        return {'ethtool_features': ethtool_features}
